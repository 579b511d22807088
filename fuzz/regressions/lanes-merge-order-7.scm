; ndvm-fuzz regression, oracle: lanes
; lane 1: alone Ok(Evaluation { value: Matrix { rows: 3, cols: 3, data: [0.6962784, 0.9240339600000003, 0.43179396000000003, 2.5900886400000003, 3.3724600560000004, 2.880220056, 2.6346360000000004, 3.5381880000000003, 2.9017920000000004] }, grads: [Gradient { name: "p0", per_lane: [33.352696] }, Gradient { name: "p1", per_lane: [5.362256] }], faults: [false] }), in the batch Some(Evaluation { value: Matrix { rows: 3, cols: 3, data: [0.6962784, 0.9240339600000003, 0.43179396000000003, 2.5900886400000003, 3.3724600560000004, 2.880220056, 2.6346360000000004, 3.5381880000000003, 2.9017920000000004] }, grads: [Gradient { name: "p0", per_lane: [33.35269600000001] }, Gradient { name: "p1", per_lane: [5.362256] }], faults: [false] })
; found: seed 7, program 30917
;; param p0: -1.122 1.086
;; param p1: 0.219 0.84
(matmul (transpose (mat (vec p0 p0 p0) (vec p1 p1 p0) (vec -0.99 p0 1.0))) (mat (let ((v1 p0)) (unless (<= 0.9500000000000001 v1) (set! v1 0.5)) (vec p0 v1 v1)) (vec 0.5 p0 0.5) (* p0 (vec p1 p0 p0))))
