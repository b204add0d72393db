/**
 * Checks the compiler makes and the build erases. `Within<A, B>` compiles only when every A
 * is a B; the pair `[Within<A, B>, Within<B, A>]` proves two word unions equal, so that
 * neither side can add a word alone (the gateway's lists against @longrun/client's types).
 */
export type Within<A extends B, B> = A;
