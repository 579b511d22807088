;; Issue 16 (found by ndvm-fuzz): at a singular matrix det · A⁻ᵀ is NaN, but det's gradient is the
;; cofactor matrix. Here rows 0 and 1 are proportional at a = 1, so det = 4(a − 1) = 0 and
;; d/da = cofactor (0, 0) = 4·1 − 6·0 = 4; d/db = cofactor (2, 1) = −(6a − 6) = 0.
;; bind: a=1 b=0
;; expect: 0
;; grad: a=4 b=0
(det (mat (vec a 2.0 3.0) (vec 2.0 4.0 6.0) (vec 1.0 b 1.0)))
