;; error: P004 at 2:3
( . a)
