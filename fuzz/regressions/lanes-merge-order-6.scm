; ndvm-fuzz regression, oracle: lanes
; lane 1: alone Ok(Evaluation { value: Number([2.887293968373724]), grads: [Gradient { name: "p0", per_lane: [0.42031275804152146] }, Gradient { name: "p1", per_lane: [0.0] }], faults: [false] }), in the batch Some(Evaluation { value: Number([2.887293968373724]), grads: [Gradient { name: "p0", per_lane: [0.4203127580415216] }, Gradient { name: "p1", per_lane: [0.0] }], faults: [false] })
; found: seed 20261203, program 595
;; param p0: -1.0230000000000001 1.11
;; param p1: -0.483 -1.082
(let ((w22 0.25)) (+ (loop ((i18 0.0) (a19 (if (<= 1.0 p0) p0 p1))) (begin (set! w22 (tanh (+ w22 a19))) (+ a19 (/ p0)))) w22))
