;; Applying the squaring closure twice: a^4 = 16 at a = 2; d/da = 4a^3 = 32.
;; bind: a=2
;; expect: 16
;; grad: a=32
((lambda (f x) (f (f x))) (lambda (y) (* y y)) a)
