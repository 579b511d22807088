;; list-tail, last-pair, cadar, cdddr, cadddr, for-each: a + b + a + 1 + b + 0 = 2a + 2b + 1.
;; native: none
;; bind: a=0.7 b=1.3
;; expect: 5
;; grad: a=2 b=2
(+ (car (list-tail (list 1.0 2.0 a) 2)) (car (last-pair (list a b)))
   (cadar (list (list b a))) (length (cdddr (list 1 2 3 4)))
   (cadddr (list 1 2 3 b)) (length (for-each (lambda (x) x) (list a b))))
