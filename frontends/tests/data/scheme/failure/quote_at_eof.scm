;; error: P006 at 2:7
(a b) '