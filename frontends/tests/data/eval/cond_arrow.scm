;; cond with =>: the test's value is passed to the receiver. At a = 0.5:
;; (1) first test false; (* a 3) = 1.5 is true, the receiver squares it: 9a² = 2.25, d/da = 18a = 9.
;; (2) (< a 0) is #f, so else: 2a = 1, d/da = 2.
;; (3) the receiver sees the let's k (lexical addresses shift under the hidden temporary): 2a + 2 = 3, d/da = 2.
;; Total 6.25, d/da = 13.
;; bind: a=0.5
;; expect: 6.25
;; grad: a=13
(+ (cond ((> a 10.0) 1.0)
         ((* a 3.0) => (lambda (v) (* v v)))
         (else 0.0))
   (cond ((< a 0.0) => (lambda (b) 5.0))
         (else (* 2.0 a)))
   (let ((k 2.0))
     (cond ((* a k) => (lambda (v) (+ v k))))))
