;; Two 60-level (cons acc acc) structures (2^60 leaves each, 60 cells each): equal? compares each
;; pair of cells once, so it answers #t in linear time.
;; expect: #t
(define (grow n)
  (loop ((i 0) (acc '()))
    (if (= i n) acc (recur (+ i 1) (cons acc acc)))))
(equal? (grow 60) (grow 60))
