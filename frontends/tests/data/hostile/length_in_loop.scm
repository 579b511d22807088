;; length of a 100,000-element list, 100,000 times: each call charges 100,000 work units, so the
;; 200M budget ends it after about 2,000 calls instead of hours.
;; expect: E007
(define l
  (loop ((i 0) (acc '()))
    (if (= i 100000) acc (recur (+ i 1) (cons i acc)))))
(loop ((k 0) (s 0))
  (if (= k 100000) s (recur (+ k 1) (+ s (length l)))))
