;; case-lambda picks the first clause whose arity fits: one argument 3r² = 0.75, two w·h = 4a = 2,
;; a rest clause w·h·(length rest) = 2a·3 = 3. Total 5.75 at a = 0.5; d/da = 6a + 4 + 6 = 13.
;; bind: a=0.5
;; expect: 5.75
;; grad: a=13
(define area
  (case-lambda
    ((r) (* 3.0 r r))
    ((w h) (* w h))
    ((w h . rest) (* w h (length rest)))))
(+ (area a) (area a 4.0) (area a 2.0 1 1 1))
