; ndvm-fuzz regression, oracle: lanes
; lane 0: alone Ok(Evaluation { value: Number([-0.17190387539000002]), grads: [Gradient { name: "p0", per_lane: [0.29724500000000004] }, Gradient { name: "p1", per_lane: [-0.67918677] }], faults: [false] }), in the batch Some(Evaluation { value: Number([-0.17190387539000002]), grads: [Gradient { name: "p0", per_lane: [0.29724500000000004] }, Gradient { name: "p1", per_lane: [-0.6791867700000002] }], faults: [false] })
; found: seed 7, program 37135
;; param p0: -0.615 -1.318
;; param p1: 0.221 -0.999
(loop ((i1 0.0) (a2 (case (floor (* 3.0 (sigmoid p1))) ((1.0 2.0) p1) (else p0)))) (* a2 (det (mat (vec a2 p1 p0) (vec 1.25 -0.24 a2) (vec 3.0 0.5 p1)))))
