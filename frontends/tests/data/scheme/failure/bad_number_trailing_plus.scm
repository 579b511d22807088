;; error: P003 at 2:4
(f 1+)
