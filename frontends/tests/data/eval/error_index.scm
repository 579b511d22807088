;; Index 5 of a 2-vector is out of range.
;; error: E010 3:1
(ref (vec 1 2) 5)
