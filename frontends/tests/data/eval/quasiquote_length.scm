;; `(1 ,a ,@(list 2 3) 4) = (1 a 2 3 4): length 5, second element a = 7; total 12, d/da = 1.
;; bind: a=7
;; expect: 12
;; grad: a=1
(let ((xs `(1 ,a ,@(list 2.0 3.0) 4)))
  (+ (length xs) (car (cdr xs))))
