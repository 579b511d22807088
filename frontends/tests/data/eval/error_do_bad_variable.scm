;; A do variable spec with four parts: the spec itself is named.
;; error: E005 4:6
(do ((i 0 (+ i 1))
     (j 0 1 2))
    ((= i 3) j))
