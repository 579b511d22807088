;; eval of a 60-level shared structure whose tree is 2^60 cells: the copy into the heap is linear
;; (memoised), the decoder's budget stops the exponential decode (work or memory limit).
;; expect: E007|E013
(define s
  (loop ((i 0) (acc '(+ 1)))
    (if (= i 60) acc (recur (+ i 1) (cons acc acc)))))
(eval s)
