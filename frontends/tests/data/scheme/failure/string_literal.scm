;; error: P004 at 2:10
(display "hello")
