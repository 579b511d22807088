;; error: P003 at 3:3
(define y
  -3x)
