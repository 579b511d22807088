;; length of a 100,000-element list, 100,000 times: each call charges 100,000 work units, so a
;; 20M budget ends it after about 200 calls instead of hours (the default 200M budget takes 2,000
;; calls, seconds in a debug build on a loaded machine; without the charge the 10 s deadline
;; would end it, E014).
;; expect: E007
;; max_steps: 20000000
(define l
  (loop ((i 0) (acc '()))
    (if (= i 100000) acc (recur (+ i 1) (cons i acc)))))
(loop ((k 0) (s 0))
  (if (= k 100000) s (recur (+ k 1) (+ s (length l)))))
