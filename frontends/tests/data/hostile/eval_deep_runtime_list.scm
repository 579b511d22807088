;; (eval d) of a 10,000-deep expression built at run time: the copy into the heap is iterative and
;; the decoder's depth limit ends it with E008.
;; expect: E008
(define d
  (loop ((i 0) (acc 1))
    (if (= i 10000) acc (recur (+ i 1) (list '+ acc)))))
(eval d)
