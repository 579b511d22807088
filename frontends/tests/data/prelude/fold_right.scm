;; fold-right nests to the right: a − (b − (2 − 0)); fold is fold-left: ((0 − a) − b) − 2.
;; bind: a=0.7 b=1.3
(+ (fold-right (lambda (x acc) (- x acc)) 0.0 (list a b 2.0))
   (* 10.0 (fold (lambda (acc x) (- acc x)) 0.0 (list a b 2.0))))
