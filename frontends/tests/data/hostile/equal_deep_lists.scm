;; equal? on two separately built 50,000-deep lists: an explicit stack, the answer is #t.
;; expect: #t
(define (deep n)
  (loop ((i 0) (acc '()))
    (if (= i n) acc (recur (+ i 1) (list acc 1)))))
(equal? (deep 50000) (deep 50000))
