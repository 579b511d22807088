;; error: P002 at 2:8
(a [b c)]
