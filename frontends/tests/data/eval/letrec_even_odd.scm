;; Mutual recursion through letrec: 10 is even, so the value is 2x = 2.5; d/dx = 2.
;; bind: x=1.25
;; expect: 2.5
;; grad: x=2
(letrec ((ev? (lambda (n) (if (= n 0) #t (od? (- n 1)))))
         (od? (lambda (n) (if (= n 0) #f (ev? (- n 1))))))
  (if (ev? 10) (* x 2.0) (* x 3.0)))
