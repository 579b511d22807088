;; A calibration model in the seed system's style.
(params (a positive 1.0)
        (b unit-interval 0.5)
        (c free 0))

(define (model x)
  (+ (* a (exp (- (* b x)))) c))

(define (loss xs ys)
  (let loop ((xs xs) (ys ys) (acc 0))
    (if (null? xs)
        acc
        (loop (cdr xs) (cdr ys)
              (+ acc (pow (- (model (car xs)) (car ys)) 2))))))

(loss '(0 1 2 3) '(1.0 .61 .37 .22))
