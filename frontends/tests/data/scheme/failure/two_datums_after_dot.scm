;; error: P004 at 2:8
(a . b c)
