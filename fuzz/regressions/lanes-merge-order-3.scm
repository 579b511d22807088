; ndvm-fuzz regression, oracle: lanes
; lane 1: alone Ok(Evaluation { value: Number([-0.37147272619999977]), grads: [Gradient { name: "p0", per_lane: [-0.056610399999999214] }, Gradient { name: "p1", per_lane: [-0.6305819000000006] }], faults: [false] }), in the batch Some(Evaluation { value: Number([-0.37147272619999977]), grads: [Gradient { name: "p0", per_lane: [-0.056610399999999214] }, Gradient { name: "p1", per_lane: [-0.6305819000000003] }], faults: [false] })
; found: seed 7, program 28257
;; param p0: -0.686 0.499
;; param p1: 0.912 0.212
(let ((f1 (lambda (x2) (det (mat (matvec (mat (vec p0 x2 1.0) (vec x2 x2 x2) (vec x2 p1 1.25)) (vec 0.02 1.1400000000000001 -1.6300000000000001)) (vec 0.02 1.1400000000000001 -1.6300000000000001) (vec p0 p0 x2)))))) (f1 (cond ((<= p1 p0) (car (list p1))) (cos 3.0))))
