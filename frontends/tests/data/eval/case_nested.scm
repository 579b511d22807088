;; A case inside a case clause (regression: the outer key's temporary was named `case`, so the
;; inner `case` decoded as a call of that temporary). 7a = 3.5 at a = 0.5; d/da = 7.
;; bind: a=0.5
;; expect: 3.5
;; grad: a=7
(case 2
  ((1) 0.0)
  ((2) (case 3 ((3) (* a 7.0)) (else 0.0)))
  (else 1.0))
