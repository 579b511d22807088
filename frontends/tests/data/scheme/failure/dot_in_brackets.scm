;; error: P004 at 2:4
[a . b]
