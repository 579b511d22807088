;; do with commands: (f 3) multiplies s by a three times with set!: a³ = 0.125, d/da = 3a² = 0.75.
;; A variable without a step keeps what set! gave it: k = 2, 4, 8, 16, then k > 10 stops: 16.
;; A do with no result expression yields nothing, so it sits before the value in a begin.
;; Total 16.125, d/da = 0.75.
;; bind: a=0.5
;; expect: 16.125
;; grad: a=0.75
(define (f n)
  (let ((s 1.0))
    (do ((i 0 (+ i 1)))
        ((= i n) s)
      (set! s (* s a)))))
(+ (f 3)
   (do ((k 2.0)) ((> k 10.0) k) (set! k (* k 2.0)))
   (begin (do ((j 0 (+ j 1))) ((= j 2))) 0.0))
