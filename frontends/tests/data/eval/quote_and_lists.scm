;; length '(1 2 (3 4) 5) = 4; car '(7 8) = 7; (null? '()) gives 1; (pair? (cons 1 2)) gives 10;
;; length of (append (1 2) (3)) = 3; cdr of (cons a b) = b = 2. Total 27; d/da = 0, d/db = 1.
;; bind: a=1 b=2
;; expect: 27
;; grad: a=0 b=1
(+ (length '(1 2 (3 4) 5))
   (car '(7 8))
   (if (null? '()) 1.0 0.0)
   (if (pair? (cons 1 2)) 10.0 0.0)
   (length (append (list 1 2) (list 3)))
   (cdr (cons a b)))
