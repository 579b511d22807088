;;; bootstrap/evaluator.scm: a meta-circular evaluator for the core language, in the language.
;;;
;;; `ndvm-search eval --via bootstrap/evaluator.scm PROG` (and `calibrate --via`) loads these
;;; definitions, then runs
;;;
;;;   (mc-run (quote (FORM ...)) (quote (INPUT-NAME ...)) (list INPUT-NAME ...))
;;;
;;; on the differentiable runtime: the user's program is quoted data, and its inputs (parameters
;;; and data) are passed in as values, so gradients flow through both interpreter levels to them.
;;;
;;; Design: an analysing evaluator (SICP 4.1.7). `mc-compile` walks the program once and turns
;;; every expression into a host closure `(lambda (env) ...)`; running the program calls those
;;; closures. Special forms are dispatched once, at analysis, and variables are resolved to
;;; lexical addresses, so a loop body costs a few host calls per node, not a dispatch.
;;; - An environment is a list of frames. A plain frame (lambda, let, loop variables) is the list
;;;   of its values. A recursive frame (letrec, internal and top-level defines) is
;;;   `(makers . values)`: a name bound to a lambda is rebuilt from its maker over the frame's
;;;   environment whenever it is referenced (no mutation, no cycles), a name bound to another value
;;;   is one of the values, evaluated in order (letrec* semantics).
;;; - User procedures are host procedures, so `map`, `apply`, `fold-left`, ... take them, and a
;;;   user tail call is a host tail call: loops and tail recursion run in constant host depth.
;;; - `loop` is a self-calling host procedure, bound as `recur` in its body (a named let binds
;;;   its name the same way): lanes that leave the loop at different iterations merge like any
;;;   branch the lanes disagree on.
;;; - Primitives come from `mc-primitives`, which maps each name to the native procedure; a free
;;;   name that is neither bound nor a primitive is looked up by the host (`eval`), which reports
;;;   an unbound variable by name.
;;; - The dialect is detected, not passed: under the reference dialect 0 is false, and `let`
;;;   binds sequentially, as the host's does.
;;; - A form this evaluator cannot express stops the run with an unbound-variable error whose
;;;   name says so: `self-hosted-evaluator-cannot-express:set!`, ...
;;;
;;; The evaluator's own names start with `mc-`; an input with such a name is refused.

(define mc-reference? (if 0 #f #t))

;; ------------------------------------------------------------------ small list helpers

(define (mc-assq k al)
  (loop ((al al))
    (cond ((null? al) #f)
          ((eq? (car (car al)) k) (car al))
          (else (recur (cdr al))))))

;; The index of `x` in `xs`, or #f. (An index is tested with `number?`: under the reference
;; dialect the index 0 is false.)
(define (mc-index-of x xs)
  (loop ((xs xs) (i 0))
    (cond ((null? xs) #f)
          ((eq? (car xs) x) i)
          (else (recur (cdr xs) (+ i 1))))))

(define (mc-drop xs n)
  (loop ((xs xs) (n n))
    (if (= n 0) xs (recur (cdr xs) (- n 1)))))

(define (mc-take xs n)
  (reverse (loop ((xs xs) (n n) (acc '()))
             (if (= n 0) acc (recur (cdr xs) (- n 1) (cons (car xs) acc))))))

(define (mc-eval-list cs env)
  (map (lambda (c) (c env)) cs))

(define (mc-compile-list es cenv)
  (map (lambda (e) (mc-compile e cenv)) es))

(define (mc-tagged? e tag)
  (if (pair? e) (eq? (car e) tag) #f))

;; Stops the run: the host reports the unbound name `self-hosted-evaluator-cannot-express:WHAT`.
(define (mc-refuse what)
  (eval (cdr (mc-assq what mc-refusals))))

(define mc-refusals
  (list (cons 'set! 'self-hosted-evaluator-cannot-express:set!)
        (cons 'do 'self-hosted-evaluator-cannot-express:do)
        (cons 'case 'self-hosted-evaluator-cannot-express:case)
        (cons 'case-lambda 'self-hosted-evaluator-cannot-express:case-lambda)
        (cons 'quasiquote 'self-hosted-evaluator-cannot-express:quasiquote)
        (cons 'unquote 'self-hosted-evaluator-cannot-express:unquote)
        (cons 'unquote-splicing 'self-hosted-evaluator-cannot-express:unquote-splicing)
        (cons 'define 'self-hosted-evaluator-cannot-express:define-outside-a-body)
        (cons 'twice 'self-hosted-evaluator-cannot-express:a-name-defined-twice-in-one-body)
        (cons 'recur-outside-a-loop 'self-hosted-evaluator-cannot-express:recur-outside-a-loop)
        (cons 'arity 'self-hosted-evaluator-wrong-number-of-arguments)))

;; ------------------------------------------------------------------ variables

;; The compile-time environment: a list of frames `(plain NAME ...)` or `(rec NAMES SLOTS)`, a
;; slot being `(lam . k)` (the k-th maker) or `(val . k)` (the k-th value).
;; `mc-lookup` gives `(plain DEPTH INDEX)`, `(lam DEPTH K)`, `(val DEPTH K)` or #f.
(define (mc-lookup name cenv)
  (loop ((fs cenv) (d 0))
    (if (null? fs)
        #f
        (let ((f (car fs)))
          (if (eq? (car f) 'plain)
              (let ((i (mc-index-of name (cdr f))))
                (if (number? i) (list 'plain d i) (recur (cdr fs) (+ d 1))))
              (let ((i (mc-index-of name (cadr f))))
                (if (number? i)
                    (let ((slot (list-ref (caddr f) i)))
                      (list (car slot) d (cdr slot)))
                    (recur (cdr fs) (+ d 1)))))))))

(define (mc-bound? name cenv)
  (pair? (mc-lookup name cenv)))

(define (mc-plain-ref d i)
  (cond ((= d 0)
         (cond ((= i 0) (lambda (env) (caar env)))
               ((= i 1) (lambda (env) (cadr (car env))))
               ((= i 2) (lambda (env) (caddr (car env))))
               (else (lambda (env) (list-ref (car env) i)))))
        ((= d 1)
         (cond ((= i 0) (lambda (env) (car (cadr env))))
               ((= i 1) (lambda (env) (cadr (cadr env))))
               (else (lambda (env) (list-ref (cadr env) i)))))
        ((= d 2)
         (cond ((= i 0) (lambda (env) (car (caddr env))))
               (else (lambda (env) (list-ref (caddr env) i)))))
        (else (lambda (env) (list-ref (list-ref env d) i)))))

(define (mc-compile-var name cenv)
  (let ((b (mc-lookup name cenv)))
    (if (pair? b)
        (let ((kind (car b)))
          (let ((d (cadr b)))
            (let ((i (caddr b)))
              (cond ((eq? kind 'plain) (mc-plain-ref d i))
                    ((eq? kind 'val) (lambda (env) (list-ref (cdr (list-ref env d)) i)))
                    (else (lambda (env)
                            ((list-ref (car (list-ref env d)) i) (mc-drop env d))))))))
        (let ((v (mc-global name)))
          (lambda (env) v)))))

;; A free name: a primitive, else whatever the host binds (an unbound name is the host's error).
(define (mc-global name)
  (let ((p (mc-assq name mc-primitives)))
    (if (pair? p) (cdr p) (eval name))))

;; ------------------------------------------------------------------ expressions

(define (mc-compile e cenv)
  (cond ((symbol? e) (mc-compile-var e cenv))
        ((pair? e)
         (let ((h (car e)))
           (let ((sf (if (symbol? h)
                         (if (mc-bound? h cenv) #f (mc-assq h mc-special-forms))
                         #f)))
             (if (pair? sf)
                 ((cdr sf) e cenv)
                 (mc-compile-app e cenv)))))
        (else (lambda (env) e))))

(define (mc-compile-app e cenv)
  (let ((h (car e)))
    (let ((args (mc-compile-list (cdr e) cenv)))
      (if (symbol? h)
          (if (mc-bound? h cenv)
              (mc-call (mc-compile-var h cenv) args)
              (mc-call-known (mc-global h) args))
          (mc-call (mc-compile h cenv) args)))))

;; A call of a procedure known at analysis (a primitive).
(define (mc-call-known p args)
  (let ((n (length args)))
    (cond ((= n 1) (let ((a (car args)))
                     (lambda (env) (p (a env)))))
          ((= n 2) (let ((a (car args)))
                     (let ((b (cadr args)))
                       (lambda (env) (p (a env) (b env))))))
          ((= n 3) (let ((a (car args)))
                     (let ((b (cadr args)))
                       (let ((c (caddr args)))
                         (lambda (env) (p (a env) (b env) (c env)))))))
          ((= n 0) (lambda (env) (p)))
          (else (lambda (env) (apply p (mc-eval-list args env)))))))

;; A call of a computed procedure.
(define (mc-call f args)
  (let ((n (length args)))
    (cond ((= n 1) (let ((a (car args)))
                     (lambda (env) ((f env) (a env)))))
          ((= n 2) (let ((a (car args)))
                     (let ((b (cadr args)))
                       (lambda (env) ((f env) (a env) (b env))))))
          ((= n 3) (let ((a (car args)))
                     (let ((b (cadr args)))
                       (let ((c (caddr args)))
                         (lambda (env) ((f env) (a env) (b env) (c env)))))))
          ((= n 0) (lambda (env) ((f env))))
          (else (lambda (env) (apply (f env) (mc-eval-list args env)))))))

(define (mc-compile-quote e cenv)
  (let ((d (cadr e)))
    (lambda (env) d)))

(define (mc-compile-if e cenv)
  (let ((t (mc-compile (cadr e) cenv)))
    (let ((c (mc-compile (caddr e) cenv)))
      (if (pair? (cdr (cddr e)))
          (let ((a (mc-compile (car (cdr (cddr e))) cenv)))
            (lambda (env) (if (t env) (c env) (a env))))
          (lambda (env) (if (t env) (c env) '()))))))

(define (mc-compile-cond e cenv)
  (mc-compile-clauses (cdr e) cenv))

(define (mc-compile-clauses cls cenv)
  (if (null? cls)
      (lambda (env) #f)
      (let ((cl (car cls)))
        (if (eq? (car cl) 'else)
            (mc-compile-seq (cdr cl) cenv)
            (let ((t (mc-compile (car cl) cenv)))
              (let ((rest (mc-compile-clauses (cdr cls) cenv)))
                (cond ((null? (cdr cl))
                       (lambda (env) (let ((v (t env))) (if v v (rest env)))))
                      ((eq? (cadr cl) '=>)
                       (let ((f (mc-compile (caddr cl) cenv)))
                         (lambda (env) (let ((v (t env))) (if v ((f env) v) (rest env))))))
                      (else
                       (let ((b (mc-compile-seq (cdr cl) cenv)))
                         (lambda (env) (if (t env) (b env) (rest env))))))))))))

(define (mc-compile-when e cenv)
  (let ((t (mc-compile (cadr e) cenv)))
    (let ((b (mc-compile-seq (cddr e) cenv)))
      (lambda (env) (if (t env) (b env) '())))))

(define (mc-compile-unless e cenv)
  (let ((t (mc-compile (cadr e) cenv)))
    (let ((b (mc-compile-seq (cddr e) cenv)))
      (lambda (env) (if (t env) '() (b env))))))

;; `and`/`or` return the deciding value itself, as the host's do.
(define (mc-compile-and e cenv)
  (mc-compile-andor (cdr e) cenv #t))

(define (mc-compile-or e cenv)
  (mc-compile-andor (cdr e) cenv #f))

(define (mc-compile-andor es cenv and?)
  (cond ((null? es) (lambda (env) and?))
        ((null? (cdr es)) (mc-compile (car es) cenv))
        (else
         (let ((a (mc-compile (car es) cenv)))
           (let ((rest (mc-compile-andor (cdr es) cenv and?)))
             (if and?
                 (lambda (env) (let ((v (a env))) (if v (rest env) v)))
                 (lambda (env) (let ((v (a env))) (if v v (rest env))))))))))

(define (mc-compile-begin e cenv)
  (mc-compile-seq (cdr e) cenv))

;; A sequence without defines; the last expression is in tail position.
(define (mc-compile-seq es cenv)
  (cond ((null? es) (lambda (env) '()))
        ((null? (cdr es)) (mc-compile (car es) cenv))
        (else
         (let ((a (mc-compile (car es) cenv)))
           (let ((rest (mc-compile-seq (cdr es) cenv)))
             (lambda (env) (a env) (rest env)))))))

;; ------------------------------------------------------------------ binding forms

;; env -> (body (cons VALUES env)), VALUES the inits' values.
(define (mc-bind inits body)
  (let ((n (length inits)))
    (cond ((= n 1) (let ((a (car inits)))
                     (lambda (env) (body (cons (list (a env)) env)))))
          ((= n 2) (let ((a (car inits)))
                     (let ((b (cadr inits)))
                       (lambda (env) (body (cons (list (a env) (b env)) env))))))
          (else (lambda (env) (body (cons (mc-eval-list inits env) env)))))))

(define (mc-compile-let e cenv)
  (cond ((symbol? (cadr e))
         (let ((bs (caddr e)))
           (mc-self-loop (cadr e) (map car bs) (mc-compile-list (map cadr bs) cenv)
                         (cdr (cddr e)) cenv)))
        (mc-reference? (mc-compile-star (cadr e) (cddr e) cenv))
        ((null? (cadr e)) (mc-compile-body (cddr e) cenv))
        (else
         (let ((bs (cadr e)))
           (mc-bind (mc-compile-list (map cadr bs) cenv)
                    (mc-compile-body (cddr e) (cons (cons 'plain (map car bs)) cenv)))))))

(define (mc-compile-let* e cenv)
  (mc-compile-star (cadr e) (cddr e) cenv))

;; One frame for all the bindings, built newest first: init k sees the frame of the first k
;; values, and a name's index counts from the newest binding of the stage it is read at.
(define (mc-compile-star bs body cenv)
  (if (null? bs)
      (mc-compile-body body cenv)
      (let ((inits (loop ((bs bs) (seen '()) (acc '()))
                     (if (null? bs)
                         (reverse acc)
                         (recur (cdr bs)
                                (cons (car (car bs)) seen)
                                (cons (mc-compile (cadr (car bs)) (cons (cons 'plain seen) cenv))
                                      acc))))))
        (let ((body (mc-compile-body body (cons (cons 'plain (reverse (map car bs))) cenv))))
          (lambda (env) (body (cons (mc-star-values inits env) env)))))))

;; The values of a `let*` frame, newest first.
(define (mc-star-values inits env)
  (loop ((inits inits) (vals '()))
    (if (null? inits)
        vals
        (recur (cdr inits) (cons ((car inits) (cons vals env)) vals)))))

;; The parameter list's fixed names and rest name ('() when none).
(define (mc-fixed ps)
  (reverse (loop ((ps ps) (acc '()))
             (if (pair? ps) (recur (cdr ps) (cons (car ps) acc)) acc))))

(define (mc-rest ps)
  (loop ((ps ps))
    (if (pair? ps) (recur (cdr ps)) ps)))

(define (mc-compile-lambda e cenv)
  (let ((fixed (mc-fixed (cadr e))))
    (let ((rest (mc-rest (cadr e))))
      (let ((n (length fixed)))
        (if (symbol? rest)
            (let ((body (mc-compile-body
                         (cddr e)
                         (cons (cons 'plain (append fixed (list rest))) cenv))))
              (lambda (env)
                (lambda args (body (cons (mc-rest-frame args n) env)))))
            (mc-make-lambda n (mc-compile-body (cddr e) (cons (cons 'plain fixed) cenv))))))))

(define (mc-rest-frame args n)
  (if (< (length args) n)
      (mc-refuse 'arity)
      (append (mc-take args n) (list (mc-drop args n)))))

(define (mc-check-arity args n)
  (if (= (length args) n) args (mc-refuse 'arity)))

(define (mc-make-lambda n body)
  (cond ((= n 1) (lambda (env) (lambda (a) (body (cons (list a) env)))))
        ((= n 2) (lambda (env) (lambda (a b) (body (cons (list a b) env)))))
        ((= n 3) (lambda (env) (lambda (a b c) (body (cons (list a b c) env)))))
        ((= n 0) (lambda (env) (lambda () (body (cons '() env)))))
        ((= n 4) (lambda (env) (lambda (a b c d) (body (cons (list a b c d) env)))))
        (else (lambda (env)
                (lambda args (body (cons (mc-check-arity args n) env)))))))

;; `loop` and named `let`: a self-calling procedure bound as SELF in a frame of its own, under
;; the frame of its variables.
(define (mc-self-loop self names inits body cenv)
  (let ((body (mc-compile-body body (cons (cons 'plain names)
                                          (cons (list 'plain self) cenv)))))
    (let ((n (length inits)))
      (cond ((= n 1)
             (let ((a (car inits)))
               (lambda (env)
                 (letrec ((f (lambda (x) (body (cons (list x) (cons (list f) env))))))
                   (f (a env))))))
            ((= n 2)
             (let ((a (car inits)))
               (let ((b (cadr inits)))
                 (lambda (env)
                   (letrec ((f (lambda (x y) (body (cons (list x y) (cons (list f) env))))))
                     (f (a env) (b env)))))))
            ((= n 3)
             (let ((a (car inits)))
               (let ((b (cadr inits)))
                 (let ((c (caddr inits)))
                   (lambda (env)
                     (letrec ((f (lambda (x y z)
                                   (body (cons (list x y z) (cons (list f) env))))))
                       (f (a env) (b env) (c env))))))))
            (else
             (lambda (env)
               (letrec ((f (lambda xs
                             (body (cons (mc-check-arity xs n) (cons (list f) env))))))
                 (apply f (mc-eval-list inits env)))))))))

(define (mc-compile-loop e cenv)
  (let ((bs (cadr e)))
    (mc-self-loop 'recur (map car bs) (mc-compile-list (map cadr bs) cenv) (cddr e) cenv)))

;; ------------------------------------------------------------------ bodies, letrec, define

;; A define as (NAME . RHS): `(define (f . ps) body ...)` is `(define f (lambda ps body ...))`.
(define (mc-definition d)
  (if (pair? (cadr d))
      (cons (car (cadr d)) (cons 'lambda (cons (cdr (cadr d)) (cddr d))))
      (cons (cadr d) (caddr d))))

(define (mc-define? e)
  (mc-tagged? e 'define))

(define (mc-compile-body forms cenv)
  (if (pair? (filter mc-define? forms))
      (mc-compile-rec forms '() cenv)
      (mc-compile-seq forms cenv)))

(define (mc-compile-letrec e cenv)
  (mc-compile-rec (map (lambda (b) (list 'define (car b) (cadr b))) (cadr e))
                  (cddr e)
                  cenv))

(define (mc-lambda-rhs? rhs cenv)
  (if (mc-tagged? rhs 'lambda) (not (mc-bound? 'lambda cenv)) #f))

;; The slots of the defined names, in order: `(lam . k)` for a lambda, `(val . k)` otherwise.
(define (mc-slots defs cenv)
  (reverse
   (loop ((defs defs) (nl 0) (nv 0) (acc '()))
     (if (null? defs)
         acc
         (if (mc-lambda-rhs? (cdar defs) cenv)
             (recur (cdr defs) (+ nl 1) nv (cons (cons 'lam nl) acc))
             (recur (cdr defs) nl (+ nv 1) (cons (cons 'val nv) acc)))))))

(define (mc-unique? names)
  (loop ((ns names))
    (cond ((null? ns) #t)
          ((number? (mc-index-of (car ns) (cdr ns))) #f)
          (else (recur (cdr ns))))))

;; FORMS (defines and expressions, in order) then the body TAIL, in a recursive frame of every
;; name FORMS define (letrec* semantics).
(define (mc-compile-rec forms tail cenv)
  (let ((defs (map mc-definition (filter mc-define? forms))))
    (let ((names (map car defs)))
      (if (mc-unique? names)
          (let ((slots (mc-slots defs cenv)))
            (let ((cenv2 (cons (list 'rec names slots) cenv)))
              (mc-rec-runner
               (map (lambda (d) (mc-compile (cdr d) cenv2))
                    (filter (lambda (d) (mc-lambda-rhs? (cdr d) cenv)) defs))
               (mc-rec-steps forms cenv cenv2)
               (if (null? tail)
                   (mc-rec-final forms cenv2)
                   (mc-compile-body tail cenv2)))))
          (mc-refuse 'twice)))))

;; The steps before the final expression: `(val . C)` appends a value, `(expr . C)` runs for
;; effect; lambda defines need no step.
(define (mc-rec-steps forms cenv cenv2)
  (let ((n (length forms)))
    (loop ((fs forms) (i 0) (acc '()))
      (if (null? fs)
          (reverse acc)
          (let ((f (car fs)))
            (cond ((mc-define? f)
                   (let ((d (mc-definition f)))
                     (if (mc-lambda-rhs? (cdr d) cenv)
                         (recur (cdr fs) (+ i 1) acc)
                         (recur (cdr fs) (+ i 1)
                                (cons (cons 'val (mc-compile (cdr d) cenv2)) acc)))))
                  ((= i (- n 1)) (recur (cdr fs) (+ i 1) acc))
                  (else (recur (cdr fs) (+ i 1)
                               (cons (cons 'expr (mc-compile f cenv2)) acc)))))))))

;; The final expression of a body (a body that ends in a define has the value '()).
(define (mc-rec-final forms cenv2)
  (let ((last (list-ref forms (- (length forms) 1))))
    (if (mc-define? last)
        (lambda (env) '())
        (mc-compile last cenv2))))

(define (mc-rec-runner makers steps final)
  (if (null? steps)
      (lambda (env) (final (cons (cons makers '()) env)))
      (lambda (env)
        (loop ((vals '()) (steps steps))
          (let ((env2 (cons (cons makers vals) env)))
            (if (null? steps)
                (final env2)
                (let ((s (car steps)))
                  (if (eq? (car s) 'val)
                      (recur (append vals (list ((cdr s) env2))) (cdr steps))
                      (begin ((cdr s) env2)
                             (recur vals (cdr steps)))))))))))

(define (mc-compile-params e cenv)
  (lambda (env) '()))

;; ------------------------------------------------------------------ tables and entry

(define (mc-refuser what)
  (lambda (e cenv) (mc-refuse what)))

(define mc-special-forms
  (list (cons 'if mc-compile-if)
        (cons 'let mc-compile-let)
        (cons 'let* mc-compile-let*)
        (cons 'quote mc-compile-quote)
        (cons 'lambda mc-compile-lambda)
        (cons 'cond mc-compile-cond)
        (cons 'loop mc-compile-loop)
        (cons 'begin mc-compile-begin)
        (cons 'letrec mc-compile-letrec)
        (cons 'letrec* mc-compile-letrec)
        (cons 'and mc-compile-and)
        (cons 'or mc-compile-or)
        (cons 'when mc-compile-when)
        (cons 'unless mc-compile-unless)
        (cons 'params mc-compile-params)
        (cons 'recur (mc-refuser 'recur-outside-a-loop))
        (cons 'define (mc-refuser 'define))
        (cons 'set! (mc-refuser 'set!))
        (cons 'do (mc-refuser 'do))
        (cons 'case (mc-refuser 'case))
        (cons 'case-lambda (mc-refuser 'case-lambda))
        (cons 'quasiquote (mc-refuser 'quasiquote))
        (cons 'unquote (mc-refuser 'unquote))
        (cons 'unquote-splicing (mc-refuser 'unquote-splicing))))

;; Every numeric, tensor and list primitive, most used first.
(define mc-primitives
  (list (cons '+ +) (cons '* *) (cons '- -) (cons '/ /)
        (cons 'exp exp) (cons 'log log) (cons 'sin sin) (cons 'cos cos) (cons 'sqrt sqrt)
        (cons 'pow pow) (cons 'abs abs) (cons '= =) (cons '< <) (cons '> >) (cons '<= <=)
        (cons '>= >=) (cons 'min min) (cons 'max max) (cons 'tanh tanh)
        (cons 'square square) (cons 'sigmoid sigmoid) (cons 'expt expt)
        (cons 'tan tan) (cons 'sinh sinh) (cons 'cosh cosh) (cons 'asin asin)
        (cons 'acos acos) (cons 'atan atan) (cons 'atan2 atan2)
        (cons 'floor floor) (cons 'ceiling ceiling) (cons 'round round)
        (cons 'truncate truncate) (cons 'modulo modulo) (cons 'remainder remainder)
        (cons 'quotient quotient)
        (cons 'not not) (cons 'zero? zero?) (cons 'positive? positive?)
        (cons 'negative? negative?) (cons 'number? number?) (cons 'boolean? boolean?)
        (cons 'symbol? symbol?) (cons 'null? null?) (cons 'pair? pair?)
        (cons 'procedure? procedure?) (cons 'vector? vector?) (cons 'eq? eq?)
        (cons 'eqv? eqv?) (cons 'equal? equal?)
        (cons 'vec vec) (cons 'vector vector) (cons 'mat mat) (cons 'ref ref)
        (cons 'vector-ref vector-ref) (cons 'dot dot) (cons 'cross cross) (cons 'norm norm)
        (cons 'normalize normalize) (cons 'vsum vsum) (cons 'vlen vlen)
        (cons 'vector-length vector-length) (cons 'scale scale) (cons 'matvec matvec)
        (cons 'matmul matmul) (cons 'transpose transpose) (cons 'trace trace) (cons 'det det)
        (cons 'logdet logdet) (cons 'inv inv) (cons 'outer outer) (cons 'eye eye)
        (cons 'zeros zeros) (cons 'ones ones)
        (cons 'cons cons) (cons 'car car) (cons 'cdr cdr) (cons 'cadr cadr) (cons 'cddr cddr)
        (cons 'caar caar) (cons 'cdar cdar) (cons 'caddr caddr) (cons 'list list)
        (cons 'length length) (cons 'append append) (cons 'reverse reverse)
        (cons 'list-ref list-ref) (cons 'apply apply) (cons 'map map) (cons 'filter filter)
        (cons 'fold-left fold-left) (cons 'fold fold) (cons 'fold-right fold-right)))

;; Runs the program FORMS with the input NAMES bound to VALUES.
(define (mc-run forms names values)
  ((mc-compile-body (filter (lambda (f) (not (mc-tagged? f 'params))) forms)
                    (list (cons 'plain names)))
   (list values)))
