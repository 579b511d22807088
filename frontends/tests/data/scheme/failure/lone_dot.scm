;; error: P004 at 3:1
(a b)
.
