;; error: P001 at 2:8
(f 1 2 [3 4
