;; Lanes that disagree on a branch returning two 100,000-element lists (and two 60-level shared
;; structures) merge them element by element on an explicit stack, each pair of cells once.
;; lanes: 2
;; grad: a=0.5
;; expect: 100060
(define (build n)
  (loop ((i 0) (acc '()))
    (if (= i n) acc (recur (+ i 1) (cons i acc)))))
(define (grow n)
  (loop ((i 0) (acc '()))
    (if (= i n) acc (recur (+ i 1) (cons acc acc)))))
(define l (build 100000))
(define merged (if (> a 0.5005) l (map (lambda (v) v) l)))
(define shared (if (> a 0.5005) (grow 60) (grow 60)))
(define (depth s) (loop ((s s) (d 0)) (if (null? s) d (recur (car s) (+ d 1)))))
(+ (length merged) (depth shared))
