;; set! in one arm of an if: the taken arm assigns, the other leaves y alone. y = a, then
;; (> a 0) so y = 3y = 1.5; (< a 0) is false so y is not negated. Then a loop adds a twice:
;; 1.5 + 2a = 2.5 at a = 0.5; d/da = 3 + 2 = 5.
;; bind: a=0.5
;; expect: 2.5
;; grad: a=5
(let ((y a))
  (if (> a 0.0) (set! y (* 3.0 y)))
  (when (< a 0.0) (set! y (- y)))
  (loop ((i 0))
    (if (< i 2)
        (begin (set! y (+ y a)) (recur (+ i 1)))
        y)))
