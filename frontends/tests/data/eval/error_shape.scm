;; Adding a 2-vector to a 3-vector is a shape mismatch.
;; error: E004 4:3
(vsum
  (+ (vec 1 2) (vec 1 2 3)))
