; ndvm-fuzz regression, oracle: lanes
; lane 1: alone Ok(Evaluation { value: Number([1.0]), grads: [Gradient { name: "p0", per_lane: [NaN] }, Gradient { name: "p1", per_lane: [NaN] }, Gradient { name: "p2", per_lane: [NaN] }], faults: [true] }), in the batch Some(Evaluation { value: Number([1.0]), grads: [Gradient { name: "p0", per_lane: [0.0] }, Gradient { name: "p1", per_lane: [0.0] }, Gradient { name: "p2", per_lane: [0.0] }], faults: [false] })
; found: seed 1, program 185
;; param p0: -0.176 -0.86
;; param p1: 0.089 -0.747
;; param p2: -0.763 0.742
(cos (cond ((< p2 p0) 0.5) (else (det (outer (cond (else (vec p0 p2 p2))) (vec p1 p0 -1.6400000000000001))))))
