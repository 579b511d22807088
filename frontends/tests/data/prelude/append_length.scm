;; append of four lists (one empty) has 5 elements; list-ref 1 of (a b 3) is b: 5 + b.
;; bind: a=0.7 b=1.3
(+ (length (append (list a) '() (list b b) (list 1.0)))
   (list-ref (append (list a b) (list 3.0)) 1)
   (length (append)) (length (append (list a))))
