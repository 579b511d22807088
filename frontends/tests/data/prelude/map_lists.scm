;; map over two and three lists, as long as the shortest: ab + ba, then a·b·1 + b·a·2.
;; bind: a=0.7 b=1.3
(+ (apply + (map * (list a b) (list b a 5.0)))
   (apply + (map (lambda (x y z) (* x y z)) (list a b) (list b a) (list 1.0 2.0 3.0))))
