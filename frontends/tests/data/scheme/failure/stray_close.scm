;; error: P002 at 3:6
(a b)
(c d))
