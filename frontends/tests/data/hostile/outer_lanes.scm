;; A 4096x4096 outer product of per-lane vectors at 1408 lanes would need 189 GB: refused before
;; anything is allocated.
;; lanes: 1408
;; grad: a=0.5
;; expect: E013
(outer (scale (* a 2.0) (ones 4096)) (ones 4096))
