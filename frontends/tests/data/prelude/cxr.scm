;; the native c[ad]r compositions: b + b + a + b + a.
;; bind: a=0.7 b=1.3
(+ (cadr (list a b)) (caddr (list 1.0 2.0 b)) (caar (list (list a)))
   (car (cdar (list (list 1.0 b)))) (car (cddr (list 1.0 2.0 a))))
