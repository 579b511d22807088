;; map then fold-left: a + 2a + 3a = 6a.
;; bind: a=0.7
(fold-left + 0 (map (lambda (x) (* a x)) (list 1.0 2.0 3.0)))
