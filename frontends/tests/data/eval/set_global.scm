;; set! on a top-level variable: s = a, then s = s², then s = s + a: a² + a = 0.75 at a = 0.5;
;; d/da = 2a + 1 = 2.
;; bind: a=0.5
;; expect: 0.75
;; grad: a=2
(define s 0.0)
(set! s (+ s a))
(set! s (* s s))
(set! s (+ s a))
s
