;; Integers, decimals, exponents and the non-finite literals; all read as f64.
0
42
-7
+3
.5
5.
-0.25
+.5
-.5
1e-8
2.5E+3
6.02e23
1e300
-0.0
+inf.0
-inf.0
+nan.0
123456789012345678901234567890
0.1
(+ 1 -1 .5)
