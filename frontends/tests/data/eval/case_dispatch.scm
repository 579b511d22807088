;; (case 3 ...) takes the (3 4) clause: 20a = 10; (case 'z ...) falls to else: 2. Total 12, d/da = 20.
;; bind: a=0.5
;; expect: 12
;; grad: a=20
(+ (case 3 ((1 2) 10.0) ((3 4) (* a 20.0)) (else 30.0))
   (case 'z ((a) 1.0) (else 2.0)))
