;; sum of squared residuals of y = a x + b over the rows (x, y) of data
(loop ((i 0) (acc 0))
  (if (= i 4)
      acc
      (let* ((row (ref data i))
             (e (- (+ (* a (ref row 0)) b) (ref row 1))))
        (recur (+ i 1) (+ acc (* e e))))))
