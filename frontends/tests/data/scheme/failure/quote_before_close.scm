;; error: P002 at 2:5
(a ')
