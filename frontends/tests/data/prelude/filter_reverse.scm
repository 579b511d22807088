;; filter keeps b and 3 (a < 1), reverse puts 3 first: 3 + b.
;; bind: a=0.7 b=1.3
(let ((kept (reverse (filter (lambda (x) (> x 1.0)) (list a b 3.0)))))
  (+ (car kept) (cadr kept)))
