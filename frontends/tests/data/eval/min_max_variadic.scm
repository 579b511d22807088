;; min over {a, 3, b} is a = 1, max is b = 5; each contributes d/d(self) = 1.
;; bind: a=1 b=5
;; expect: 6
;; grad: a=1 b=1
(+ (min a 3.0 b) (max a 3.0 b))
