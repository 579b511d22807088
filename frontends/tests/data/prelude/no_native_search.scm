;; assoc, assq, member, memq: no native twin, so the value is stated: b + a + (2 + a) + 1 = 2a + b + 3.
;; native: none
;; bind: a=0.7 b=1.3
;; expect: 5.7
;; grad: a=2 b=1
(+ (cdr (assoc 'y (list (cons 'x a) (cons 'y b))))
   (cdr (assq 'x (list (cons 'x a) (cons 'y b))))
   (apply + (member 2.0 (list 1.0 2.0 a)))
   (length (memq 'c '(a b c))))
